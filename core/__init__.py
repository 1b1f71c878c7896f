"""interlude.core: the pure interrupt/resume state machine."""
