"""The Pulumi program: one pipeline from a stack's config to its resources, and the layers it builds."""
