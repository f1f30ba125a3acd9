"""The front end's core: the AST walker (builder), the state of the kernel being built (context), and the values it manipulates."""
