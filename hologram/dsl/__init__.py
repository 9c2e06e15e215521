"""The kernel language front end: the document schema (document, schema, positions,
locators, yaml_scalars), the body parser (parser, ast, grammar.lark), semantic analysis
into the IR (analyze and the rules it uses: typerules, shapes, functions, reductions) and
the built-in translators.

The parser and analyzer are imported by name where they are needed (`hologram.dsl.analyze.to_ir`),
never by this package, so importing a translator does not load lark.
"""
