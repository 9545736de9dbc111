"""``python -m controller``: the controller without the ``openrl-place`` wrapper."""

from controller.main import command

command(prog_name="openrl-place controller")
