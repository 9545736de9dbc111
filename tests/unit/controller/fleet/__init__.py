"""Tests of controller/fleet/."""
