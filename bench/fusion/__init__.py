"""Stage `fusion`: merge the dense and lexical candidate pools into one ranking (RRF, convex)."""
