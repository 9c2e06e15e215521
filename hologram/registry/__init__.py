"""The plugin registry: the `hologram` entry points loaded once (backends, translators,
passes, bundles, commands), looked up by name, and the pass pipelines they make."""
