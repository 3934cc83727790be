-- The text of every indexed file and collection document, as it was indexed (not the
-- working tree of today): what read, grep and file listings answer from. A content row
-- belongs to its file row and goes when the file does. The trigram indexes let grep's
-- LIKE and regular-expression filters pick candidate files without reading every text.
CREATE TABLE file_contents (
    repository_id bigint  NOT NULL,
    path          text    NOT NULL,
    content       text    NOT NULL,                      -- UTF-8 (invalid bytes replaced)
    line_count    integer NOT NULL,
    PRIMARY KEY (repository_id, path),
    FOREIGN KEY (repository_id, path) REFERENCES files (repository_id, path) ON DELETE CASCADE
);
CREATE INDEX file_contents_trgm ON file_contents USING gin (content gin_trgm_ops);

CREATE TABLE collection_document_contents (
    collection_id bigint  NOT NULL,
    path          text    NOT NULL,
    content       text    NOT NULL,
    line_count    integer NOT NULL,
    PRIMARY KEY (collection_id, path),
    FOREIGN KEY (collection_id, path)
        REFERENCES collection_documents (collection_id, path) ON DELETE CASCADE
);
CREATE INDEX collection_document_contents_trgm ON collection_document_contents
    USING gin (content gin_trgm_ops);
