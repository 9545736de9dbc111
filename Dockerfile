# openrl-place image: `openrl-place controller`, as the Deployment in
# manifests/base runs it, and `openrl-place timeslicer` (manifests/timeslicer).
#
#   docker build -t registry.example/openrl/openrl-place:0.1.0 .
#
# Two stages: build a wheel of the project (and of its dependencies) with the
# full toolchain, then install only the wheels into a clean slim image that
# runs as an unprivileged user and needs nothing writable but /tmp.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY placement/ placement/
COPY cli/ cli/
COPY controller/ controller/
COPY timeslicer/ timeslicer/
RUN pip wheel --wheel-dir /wheels '.[controller]'

FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels 'openrl-place[controller]' \
    && groupadd --system --gid 65532 openrl \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin openrl
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["openrl-place", "controller"]
