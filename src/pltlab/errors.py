"""User-facing errors: the CLI prints them as one line and exits non-zero."""


class PltError(Exception):
    """An error caused by input or environment, reported as one clear line."""
