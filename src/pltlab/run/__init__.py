"""One measured page load: topology + replay + loader + validity, and the measurement kinds
built on it (traced loads, flows)."""
