"""Estimates written beside every render: hourly cost (cost.md) and `pulumi up` duration (timeline.md)."""
