-- Each qualified name's trigram count, indexed, so that a short query reads only names of
-- a count that can reach the similarity threshold (search_sql.SYMBOL_BOUNDED_TRIGRAMS):
-- the range on this index and the trigram index are ANDed before any row is read. The
-- expression is the one search_sql writes.
CREATE INDEX code_nodes_qname_trigrams ON code_nodes
    ((coalesce(array_length(show_trgm(qualified_name), 1), 0)));
