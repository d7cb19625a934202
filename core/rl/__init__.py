"""RL: the arena as an environment for trainers. `rewards` turns a Result into one number;
`arena` is the reward API (a candidate's source in, a scored Result and a reward out, batches
across devices); `env` is the multi-turn environment; `adapters/` are thin adapters to
trainers' interfaces (Gymnasium, TRL, verl, verifiers) and the client of `arena serve`. The top
layer: nothing in `core` imports it."""
