"""Experiments: loading pages over emulated WANs, repeatedly, and judging every run's validity."""
