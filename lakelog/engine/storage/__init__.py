"""Storage: where the store's bytes live, local paths or S3, below the commit core.

* :mod:`engine.storage.object_store` -- one filesystem (pyarrow's) per store URI, local or
  ``s3://`` / ``s3a://`` through s3fs with the endpoint and credentials Spark's S3A would use;
  put-if-absent of a complete file (``link(2)`` locally, ``If-None-Match: *`` on S3), the
  directory fsyncs that make an acknowledgement durable, listings, removal of a tree.

Nothing here knows Delta: the commit core (:mod:`engine.commit`) decides what to write.
"""
