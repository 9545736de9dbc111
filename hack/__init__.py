"""The testbed: a local control plane, fake GPU nodes, and the scripts that drive and audit it.

A package so the scripts import each other without path edits; run them as
modules from the repository root (``python -m hack.burst``). See hack/README.md.
"""
