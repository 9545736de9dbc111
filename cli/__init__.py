"""openrl-place's command line: ``openrl-place simulate`` replays a scenario offline."""
