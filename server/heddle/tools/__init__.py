"""The tools the model can call."""

BUILTIN_TOOL_NAMES = ("Read", "Glob", "Grep", "LS", "Edit", "MultiEdit", "Write", "Bash",
                      "TodoWrite", "Task", "PresentPlan")
"""The built-in tools in the order they are offered (`registry.builtin_tools` builds them)."""
