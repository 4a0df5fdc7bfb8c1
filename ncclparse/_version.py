"""The package version: one source, read statically by the build (pyproject.toml)."""

__version__ = "0.1.0"
