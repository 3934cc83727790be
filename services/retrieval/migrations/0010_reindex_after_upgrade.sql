-- What an earlier release did not store is read again from the source, in the background
-- (retrieval/upgrades.py): `reindex_reason` says why until a run has replaced the old
-- index, and the repository reports `stale` with that reason meanwhile. Empty: nothing
-- is missing.
ALTER TABLE repositories ADD COLUMN reindex_reason text NOT NULL DEFAULT '';
ALTER TABLE collections ADD COLUMN reindex_reason text NOT NULL DEFAULT '';

-- Files indexed before file texts were stored (migration 0005) have none, so read and
-- grep answered nothing for them. Their hash is cleared: the next run reads them again.
UPDATE files f SET content_hash = ''
WHERE NOT EXISTS (
    SELECT 1 FROM file_contents c WHERE c.repository_id = f.repository_id AND c.path = f.path
);
UPDATE repositories r
SET reindex_reason = 'indexed by an earlier release that kept no file texts; re-indexing'
WHERE EXISTS (SELECT 1 FROM files f WHERE f.repository_id = r.id AND f.content_hash = '');

UPDATE collection_documents d SET content_hash = ''
WHERE NOT EXISTS (
    SELECT 1 FROM collection_document_contents c
    WHERE c.collection_id = d.collection_id AND c.path = d.path
);
-- A collection of uploaded documents has no source to read again: it says so until the
-- documents are uploaded again.
UPDATE collections c
SET reindex_reason = CASE WHEN c.source = ''
    THEN 'indexed by an earlier release that kept no document texts; upload the documents again'
    ELSE 'indexed by an earlier release that kept no document texts; re-indexing' END
WHERE EXISTS (
    SELECT 1 FROM collection_documents d WHERE d.collection_id = c.id AND d.content_hash = ''
);
