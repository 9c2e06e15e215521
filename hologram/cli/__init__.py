"""The `hologram` command (main), its `bench` and `diff-test` subcommands."""
