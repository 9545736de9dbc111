"""Tests of controller/store/."""
