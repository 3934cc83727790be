-- References answer the line of each use, and calls through a receiver whose type the file
-- states resolve to that type's member.
--
-- An edge stands for every use of one name inside one node: `lines` are the 1-based lines
-- of those uses. `receiver` is, for a `recv.member` call, the receiver's type as the file
-- states it (`x = Foo()`, `x: Foo`) or the import path of an imported receiver, which edge
-- resolution follows; `code_nodes.bindings`, on module nodes only, maps the module-level
-- names whose type the file states to that type ({"app": "flasky.Flask"}), for the files
-- that import those names.
--
-- Nullable, without a default: adding them rewrites nothing and holds the lock for a
-- moment, and an earlier release writing rows during a rolling update leaves them NULL.
-- Rows written before this migration keep NULL until their file is indexed again (it
-- changes, or the repository is removed and indexed again): references then answer the
-- enclosing node's first line, and such a file's receivers are unknown, as before.
ALTER TABLE code_edges ADD COLUMN lines integer[];
ALTER TABLE code_edges ADD COLUMN receiver text;
ALTER TABLE code_nodes ADD COLUMN bindings jsonb;
