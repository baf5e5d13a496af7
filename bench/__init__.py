"""bench: a benchmarking harness for retrieval-augmented generation, evaluated layer by layer."""

__version__ = "0.1.0"
