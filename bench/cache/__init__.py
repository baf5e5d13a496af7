"""Content-addressed artifact cache shared by every stage (and by every worker of a sweep)."""
