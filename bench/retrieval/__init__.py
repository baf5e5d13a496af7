"""Stage `retrieval`: queries -> ranked candidate documents (``Hits``), with latency samples."""
