"""The processes Heddle starts for tools and hooks: their process groups, the reaper that kills
them if the daemon dies, and the environment they get (secrets removed)."""
