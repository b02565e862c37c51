"""Emulated WAN: network namespaces, the link between them, and per-namespace TCP knobs
(wan: what to build; topology: building it; emulator, supervise, lateness, clean, probes,
check, shell)."""
