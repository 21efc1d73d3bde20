"""What MCP clients see.

The operation registry (handlers' declarations plus the words of tools.yaml), meta-tools, how texts
name operations, the compact text of answers, resources, completions, prompts and the generated docs.
"""
