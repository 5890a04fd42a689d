"""The tools around the compiler, behind the `ember` command: doctor, bench, explain, cache."""
