"""every uploader of an input's bytes may read it (identical inputs from two renters are one blob)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 03:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blob_holders',
                    sa.Column('content_hash', sa.String(length=66), nullable=False),
                    sa.Column('account', sa.String(length=42), nullable=False),
                    sa.PrimaryKeyConstraint('content_hash', 'account'))
    op.execute("INSERT INTO blob_holders (content_hash, account) SELECT content_hash, owner FROM blobs")


def downgrade() -> None:
    op.drop_table('blob_holders')
