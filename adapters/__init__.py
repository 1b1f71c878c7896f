"""interlude.adapters: I/O at the edges of the pure core."""
