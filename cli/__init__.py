"""openrl-place's commands: ``simulate`` and ``compare`` offline; ``snapshot``, ``explain``
and ``kubectl openrl`` on a live cluster, through the controller's reading."""
