"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 15:16:46.050251
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blobs',
    sa.Column('content_hash', sa.String(length=66), nullable=False),
    sa.Column('owner', sa.String(length=42), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('content_hash')
    )
    op.create_table('chain_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('tx_hash', sa.String(length=66), nullable=False),
    sa.Column('log_index', sa.Integer(), nullable=False),
    sa.Column('contract', sa.String(length=64), nullable=False),
    sa.Column('event', sa.String(length=64), nullable=False),
    sa.Column('args', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('tx_hash', 'log_index', name='uq_chain_events_tx_log')
    )
    with op.batch_alter_table('chain_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_chain_events_block_number'), ['block_number'], unique=False)
        batch_op.create_index(batch_op.f('ix_chain_events_event'), ['event'], unique=False)

    op.create_table('challenges',
    sa.Column('challenge_id', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('subject', sa.BigInteger(), nullable=False),
    sa.Column('gpu_index', sa.Integer(), nullable=True),
    sa.Column('challenger', sa.String(length=42), nullable=False),
    sa.Column('provider', sa.String(length=42), nullable=False),
    sa.Column('k', sa.Integer(), nullable=False),
    sa.Column('bond', sa.String(length=78), nullable=False),
    sa.Column('response_deadline', sa.BigInteger(), nullable=False),
    sa.Column('randomness', sa.String(length=66), nullable=True),
    sa.Column('status', sa.String(length=24), nullable=False),
    sa.Column('dispute_id', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('challenge_id')
    )
    with op.batch_alter_table('challenges', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_challenges_provider'), ['provider'], unique=False)

    op.create_table('dispatches',
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('queue', sa.String(length=64), nullable=False),
    sa.Column('task_id', sa.String(length=64), nullable=True),
    sa.Column('queued_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('job_id')
    )
    op.create_table('disputes',
    sa.Column('dispute_id', sa.BigInteger(), nullable=False),
    sa.Column('ref', sa.BigInteger(), nullable=False),
    sa.Column('opener', sa.String(length=42), nullable=False),
    sa.Column('challenger', sa.String(length=42), nullable=False),
    sa.Column('provider', sa.String(length=42), nullable=False),
    sa.Column('vote_end', sa.BigInteger(), nullable=False),
    sa.Column('votes', sa.Integer(), nullable=False),
    sa.Column('verdict', sa.String(length=24), nullable=True),
    sa.Column('weight_provider_at_fault', sa.String(length=78), nullable=False),
    sa.Column('weight_challenger_wrong', sa.String(length=78), nullable=False),
    sa.PrimaryKeyConstraint('dispute_id')
    )
    with op.batch_alter_table('disputes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_disputes_provider'), ['provider'], unique=False)

    op.create_table('indexer_cursor',
    sa.Column('chain_id', sa.BigInteger(), nullable=False),
    sa.Column('last_block', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('chain_id')
    )
    op.create_table('job_outputs',
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('item_index', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=66), nullable=False),
    sa.Column('proof', sa.JSON(), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('job_id', 'item_index')
    )
    op.create_table('job_specs',
    sa.Column('spec_hash', sa.String(length=66), nullable=False),
    sa.Column('canonical', sa.Text(), nullable=False),
    sa.Column('model', sa.String(length=66), nullable=False),
    sa.Column('item_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('spec_hash')
    )
    op.create_table('jobs',
    sa.Column('job_id', sa.BigInteger(), nullable=False),
    sa.Column('renter', sa.String(length=42), nullable=False),
    sa.Column('provider', sa.String(length=42), nullable=False),
    sa.Column('token', sa.String(length=42), nullable=False),
    sa.Column('price', sa.String(length=78), nullable=False),
    sa.Column('spec_hash', sa.String(length=66), nullable=False),
    sa.Column('deadline', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('frozen', sa.Boolean(), nullable=False),
    sa.Column('funded_tx', sa.String(length=66), nullable=False),
    sa.Column('funded_block', sa.BigInteger(), nullable=False),
    sa.Column('output_root', sa.String(length=66), nullable=True),
    sa.Column('item_count', sa.BigInteger(), nullable=True),
    sa.Column('result_digest', sa.String(length=66), nullable=True),
    sa.Column('challenge_window_end', sa.BigInteger(), nullable=True),
    sa.Column('provider_amount', sa.String(length=78), nullable=True),
    sa.Column('fee', sa.String(length=78), nullable=True),
    sa.Column('refund', sa.String(length=78), nullable=True),
    sa.PrimaryKeyConstraint('job_id')
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jobs_provider'), ['provider'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_renter'), ['renter'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_spec_hash'), ['spec_hash'], unique=False)

    op.create_table('leases',
    sa.Column('lease_id', sa.BigInteger(), nullable=False),
    sa.Column('renter', sa.String(length=42), nullable=False),
    sa.Column('provider', sa.String(length=42), nullable=False),
    sa.Column('gpu_count', sa.Integer(), nullable=False),
    sa.Column('ends_at', sa.BigInteger(), nullable=False),
    sa.Column('paid', sa.String(length=78), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('ended_by', sa.String(length=42), nullable=True),
    sa.Column('provider_earned', sa.String(length=78), nullable=True),
    sa.Column('renter_refund', sa.String(length=78), nullable=True),
    sa.PrimaryKeyConstraint('lease_id')
    )
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_leases_provider'), ['provider'], unique=False)
        batch_op.create_index(batch_op.f('ix_leases_renter'), ['renter'], unique=False)

    op.create_table('models',
    sa.Column('content_hash', sa.String(length=66), nullable=False),
    sa.Column('owner', sa.String(length=42), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('format', sa.String(length=16), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('private', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('content_hash', 'owner')
    )
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_models_owner'), ['owner'], unique=False)

    op.create_table('payments',
    sa.Column('tx_hash', sa.String(length=66), nullable=False),
    sa.Column('log_index', sa.Integer(), nullable=False),
    sa.Column('block_number', sa.BigInteger(), nullable=False),
    sa.Column('contract', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=24), nullable=False),
    sa.Column('account', sa.String(length=42), nullable=False),
    sa.Column('token', sa.String(length=42), nullable=False),
    sa.Column('amount', sa.String(length=78), nullable=False),
    sa.Column('ref', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('tx_hash', 'log_index')
    )
    with op.batch_alter_table('payments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_payments_account'), ['account'], unique=False)

    op.create_table('pog_rounds',
    sa.Column('round_id', sa.BigInteger(), nullable=False),
    sa.Column('provider', sa.String(length=42), nullable=False),
    sa.Column('verifier', sa.String(length=42), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.Column('gpu_count', sa.Integer(), nullable=False),
    sa.Column('commit_deadline', sa.BigInteger(), nullable=False),
    sa.Column('requested_block', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('seed', sa.String(length=66), nullable=True),
    sa.Column('roots', sa.JSON(), nullable=True),
    sa.Column('measured_millis', sa.BigInteger(), nullable=True),
    sa.Column('gpu_class', sa.String(length=32), nullable=True),
    sa.Column('tflops_milli', sa.String(length=78), nullable=True),
    sa.Column('passed', sa.Boolean(), nullable=True),
    sa.PrimaryKeyConstraint('round_id')
    )
    with op.batch_alter_table('pog_rounds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pog_rounds_provider'), ['provider'], unique=False)

    op.create_table('provider_profiles',
    sa.Column('address', sa.String(length=42), nullable=False),
    sa.Column('cached_models', sa.JSON(), nullable=False),
    sa.Column('private_ok', sa.Boolean(), nullable=False),
    sa.Column('latency_ms', sa.Integer(), nullable=True),
    sa.Column('mining_floor_wei_per_hour', sa.String(length=78), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('address')
    )
    op.create_table('providers',
    sa.Column('address', sa.String(length=42), nullable=False),
    sa.Column('gpu_model', sa.String(length=32), nullable=False),
    sa.Column('gpu_count', sa.Integer(), nullable=False),
    sa.Column('price_per_gpu_hour', sa.String(length=78), nullable=False),
    sa.Column('price_per_job_unit', sa.String(length=78), nullable=False),
    sa.Column('metadata_uri', sa.Text(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('registered_block', sa.BigInteger(), nullable=False),
    sa.Column('pog_round_id', sa.BigInteger(), nullable=True),
    sa.Column('gpu_class', sa.String(length=32), nullable=True),
    sa.Column('tflops_milli', sa.String(length=78), nullable=True),
    sa.Column('pog_passed', sa.Boolean(), nullable=True),
    sa.Column('challenges_won', sa.Integer(), nullable=False),
    sa.Column('challenges_lost', sa.Integer(), nullable=False),
    sa.Column('jobs_finalized', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('address')
    )
    op.create_table('sessions',
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('address', sa.String(length=42), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('token_hash')
    )
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_address'), ['address'], unique=False)

    op.create_table('siwe_nonces',
    sa.Column('nonce', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('nonce')
    )
    op.create_table('stakes',
    sa.Column('account', sa.String(length=42), nullable=False),
    sa.Column('bonded', sa.String(length=78), nullable=False),
    sa.Column('unbonding', sa.String(length=78), nullable=False),
    sa.Column('slashed', sa.String(length=78), nullable=False),
    sa.PrimaryKeyConstraint('account')
    )


def downgrade() -> None:
    op.drop_table('stakes')
    op.drop_table('siwe_nonces')
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_address'))

    op.drop_table('sessions')
    op.drop_table('providers')
    op.drop_table('provider_profiles')
    with op.batch_alter_table('pog_rounds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pog_rounds_provider'))

    op.drop_table('pog_rounds')
    with op.batch_alter_table('payments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_payments_account'))

    op.drop_table('payments')
    with op.batch_alter_table('models', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_models_owner'))

    op.drop_table('models')
    with op.batch_alter_table('leases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_leases_renter'))
        batch_op.drop_index(batch_op.f('ix_leases_provider'))

    op.drop_table('leases')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jobs_spec_hash'))
        batch_op.drop_index(batch_op.f('ix_jobs_renter'))
        batch_op.drop_index(batch_op.f('ix_jobs_provider'))

    op.drop_table('jobs')
    op.drop_table('job_specs')
    op.drop_table('job_outputs')
    op.drop_table('indexer_cursor')
    with op.batch_alter_table('disputes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_disputes_provider'))

    op.drop_table('disputes')
    op.drop_table('dispatches')
    with op.batch_alter_table('challenges', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_challenges_provider'))

    op.drop_table('challenges')
    with op.batch_alter_table('chain_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_chain_events_event'))
        batch_op.drop_index(batch_op.f('ix_chain_events_block_number'))

    op.drop_table('chain_events')
    op.drop_table('blobs')
