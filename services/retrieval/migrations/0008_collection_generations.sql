-- Atomic publication for collections, as 0004 did for repositories: every chunk and
-- document row carries the generation (index run) that wrote it, searches read only chunks
-- whose generation is at most the collection's `published_generation`, and a run's
-- document texts wait in collection_document_contents_staged until it is published. A
-- run that stops leaves the previous version searchable and readable. Rows written
-- before this migration are generation 0, published.
ALTER TABLE collections ADD COLUMN published_generation bigint NOT NULL DEFAULT 0;
ALTER TABLE md_collection_chunks ADD COLUMN generation bigint NOT NULL DEFAULT 0;
ALTER TABLE collection_documents ADD COLUMN generation bigint NOT NULL DEFAULT 0;

CREATE TABLE collection_document_contents_staged (
    collection_id bigint  NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
    path          text    NOT NULL,
    generation    bigint  NOT NULL,
    content       text    NOT NULL,
    line_count    integer NOT NULL,
    PRIMARY KEY (collection_id, path)
);
