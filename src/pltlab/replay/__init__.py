"""Replay: serving an archive's recorded responses from every origin's own address."""
