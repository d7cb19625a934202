"""The store: the SQLite results store, the embedded default (`db`), its schema migrations
(`migrations`) and its error (`errors`); the leaderboard queries over it (`leaderboard`) and
the A/B comparison of two runs (`compare`). Above the evaluation (the leaderboard scores with
`core.evaluation.scoring`), beside the agents."""
