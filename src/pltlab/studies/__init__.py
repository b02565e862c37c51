"""Studies: the published experiments this lab reproduces, as plugins of the experiment engine."""
