"""Stage `generation`: answers from retrieved context (vLLM engine or server, CPU backend)."""
