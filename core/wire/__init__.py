"""The AG-UI 1.0 wire model."""
