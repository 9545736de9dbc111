"""Tests of controller/k8s/."""
