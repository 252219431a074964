"""Operations: metrics, system checks, health views, logs' context, retention."""
