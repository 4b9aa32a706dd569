"""agentkit serve: the runtime over HTTP (Anthropic Messages)."""
