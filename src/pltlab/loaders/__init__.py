"""Page loaders: the built-in browser-like HTTP/1.1 loader (Rust) and headless Chromium."""
