"""renters upload lease images (root file system tarballs) and a lease's signed key names one

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 19:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('lease_images',
                    sa.Column('content_hash', sa.String(length=66), nullable=False),
                    sa.Column('owner', sa.String(length=42), nullable=False),
                    sa.Column('size', sa.BigInteger(), nullable=False),
                    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
                    sa.PrimaryKeyConstraint('content_hash', 'owner'))
    with op.batch_alter_table('leases') as batch:
        batch.add_column(sa.Column('image', sa.String(length=66), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('leases') as batch:
        batch.drop_column('image')
    op.drop_table('lease_images')
