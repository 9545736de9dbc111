"""Tests of controller/reconcile/."""
