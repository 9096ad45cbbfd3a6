"""The package's version, for every layer that records it (reports, golden files, the reference server)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
