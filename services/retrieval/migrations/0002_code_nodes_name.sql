-- The symbol stream finds a node by its bare name even when trigram similarity to the
-- long qualified name is under the threshold (`render` vs `rich.console.Console.render`).
CREATE INDEX code_nodes_lower_name ON code_nodes (lower(name));
