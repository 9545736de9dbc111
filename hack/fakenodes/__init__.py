"""Simulated GPU nodes: a node agent, a DRA driver's slices and a kubelet that only reports."""
