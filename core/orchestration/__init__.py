"""Orchestration: many jobs on many devices. `scheduler` dispatches jobs onto device slots;
`pool` keeps one evaluator per slot (shared by runs and the RL arena); `runfile` reads and
checks a run file, `planning` expands it into jobs and agent attempts, `runs` executes them
into the store (with `RunControl` for front ends); `ray_executor` carries jobs to a Ray cluster;
`preflight` checks a run's agents and devices before it starts. Builds on the evaluation, the
agents and the store; the composition root that adds SSH executors is the front end's."""
