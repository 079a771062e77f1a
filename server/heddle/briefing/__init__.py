"""The model's briefing: what it is told about where it works (the environment) and what the
user and the project ask of it (instruction files), in the first user message of a session."""
